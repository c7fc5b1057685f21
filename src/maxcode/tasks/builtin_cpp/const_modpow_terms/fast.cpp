#include <cstdint>
#include <iostream>
using namespace std;

const uint64_t MOD = 1000000007ULL;

int main() {
    int n;
    uint64_t x, seed;
    cin >> n >> x >> seed;
    x %= MOD;
    uint64_t value = 0, term = 1;
    for (int i = 0; i < n; i++) {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        value = (value + (seed % MOD) * term) % MOD;
        term = term * x % MOD;
    }
    cout << value << "\n";
    return 0;
}
