// Correct and faster: one pass.
#include <cstdio>
int main() {
    int n;
    if (scanf("%d", &n) != 1) return 1;
    long long total = 0, x;
    for (int i = 0; i < n; ++i) { scanf("%lld", &x); total += x; }
    printf("%lld\n", total);
}
