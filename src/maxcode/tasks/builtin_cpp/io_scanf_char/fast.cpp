#include <cstdio>
#include <string>
#include <vector>

int main() {
    std::vector<char> buf;
    char chunk[1 << 16];
    size_t got;
    while ((got = fread(chunk, 1, sizeof(chunk), stdin)) > 0) buf.insert(buf.end(), chunk, chunk + got);
    std::string out;
    long long words = 0, letters = 0, lines = 0;
    bool inword = false;
    char tmp[32];
    for (char c : buf) {
        if (c == '\n') {
            int k = snprintf(tmp, sizeof(tmp), "%lld\n", words);
            out.append(tmp, k);
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
    fwrite(out.data(), 1, out.size(), stdout);
    printf("total %lld %lld\n", lines, letters);
    return 0;
}
