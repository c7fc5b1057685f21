#include <cstdio>

int main() {
    char c;
    long long words = 0, letters = 0, lines = 0;
    bool inword = false;
    while (scanf("%c", &c) == 1) {
        if (c == '\n') {
            printf("%lld\n", words);
            lines++;
            words = 0;
            inword = false;
        } else if (c == ' ') {
            inword = false;
        } else {
            letters++;
            if (!inword) words++;
            inword = true;
        }
    }
    printf("total %lld %lld\n", lines, letters);
    return 0;
}
