#include <cstdio>
#include <cstring>
#include <string>

static char s[1 << 20];

int main() {
    if (scanf("%1000000s", s) != 1) return 1;
    size_t n = strlen(s);
    std::string out(s, n);
    long long vowels = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == 'a' || c == 'e' || c == 'i' || c == 'o' || c == 'u') {
            vowels++;
            out[i] = static_cast<char>(c - 'a' + 'A');
        }
    }
    printf("%lld\n%s\n", vowels, out.c_str());
    return 0;
}
