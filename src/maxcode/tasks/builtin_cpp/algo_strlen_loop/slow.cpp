#include <cctype>
#include <cstdio>
#include <cstring>
#include <string>

static char s[1 << 20];

int main() {
    if (scanf("%1000000s", s) != 1) return 1;
    std::string out;
    long long vowels = 0;
    for (size_t i = 0; i < strlen(s); i++) {
        char c = s[i];
        if (c == 'a' || c == 'e' || c == 'i' || c == 'o' || c == 'u') {
            vowels++;
            out.push_back(static_cast<char>(toupper(c)));
        } else {
            out.push_back(c);
        }
    }
    printf("%lld\n%s\n", vowels, out.c_str());
    return 0;
}
