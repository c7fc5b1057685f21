// Tries to write outside its directory (paths in ESCAPE_TARGETS, defined by the test), then
// answers correctly so only the file system shows whether the escape worked.
#include <cstdio>
int main() {
    const char* targets[] = {ESCAPE_TARGETS};
    for (const char* t : targets) {
        if (FILE* f = fopen(t, "w")) { fputs("escaped\n", f); fclose(f); }
    }
    int n; scanf("%d", &n);
    long long total = 0, x;
    for (int i = 0; i < n; ++i) { scanf("%lld", &x); total += x; }
    printf("%lld\n", total);
}
