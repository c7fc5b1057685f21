#include <cstdio>
#include <cstdlib>
#include <vector>

int main() {
    std::vector<char> buf;
    char chunk[1 << 16];
    size_t got;
    while ((got = fread(chunk, 1, sizeof(chunk), stdin)) > 0) buf.insert(buf.end(), chunk, chunk + got);
    buf.push_back(0);
    char* p = buf.data();
    long long n = strtoll(p, &p, 10);
    long long sum = 0, best = -(1LL << 62);
    unsigned long long mix = 0;
    for (long long i = 0; i < n; i++) {
        long long x = strtoll(p, &p, 10);
        sum += x;
        if (x > best) best = x;
        mix = mix * 1000003ULL + static_cast<unsigned long long>(x);
    }
    printf("%lld %lld %llu\n", sum, best, mix);
    return 0;
}
