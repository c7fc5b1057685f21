#include <cstdint>
#include <iostream>
using namespace std;

const uint64_t MOD = 1000000007ULL;

uint64_t power(uint64_t base, uint64_t exponent) {
    uint64_t result = 1;
    base %= MOD;
    while (exponent > 0) {
        if (exponent & 1) result = result * base % MOD;
        base = base * base % MOD;
        exponent >>= 1;
    }
    return result;
}

int main() {
    int n;
    uint64_t x, seed;
    cin >> n >> x >> seed;
    uint64_t value = 0;
    for (int i = 0; i < n; i++) {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        uint64_t coefficient = seed % MOD;
        value = (value + coefficient * power(x, i)) % MOD;
    }
    cout << value << "\n";
    return 0;
}
