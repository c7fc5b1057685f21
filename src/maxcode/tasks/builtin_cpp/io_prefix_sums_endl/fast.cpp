#include <cstdio>
#include <cstdlib>
#include <vector>

static char ibuf[1 << 25];

int main() {
    size_t len = fread(ibuf, 1, sizeof(ibuf) - 1, stdin);
    ibuf[len] = 0;
    char* p = ibuf;
    long long n = strtoll(p, &p, 10);
    std::vector<char> out;
    out.reserve(static_cast<size_t>(n) * 21 + 16);
    char tmp[24];
    long long s = 0;
    for (long long i = 0; i < n; i++) {
        s += strtoll(p, &p, 10);
        int k = snprintf(tmp, sizeof(tmp), "%lld\n", s);
        out.insert(out.end(), tmp, tmp + k);
    }
    fwrite(out.data(), 1, out.size(), stdout);
    return 0;
}
