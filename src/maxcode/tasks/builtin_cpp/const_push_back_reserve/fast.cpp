#include <cstdint>
#include <iostream>
#include <vector>
using namespace std;

int main() {
    int n, rounds;
    uint64_t seed;
    cin >> n >> rounds >> seed;
    unsigned long long checksum = 0;
    for (int r = 0; r < rounds; r++) {
        size_t odd_count = 0;
        uint64_t last_odd = 0;
        for (int i = 0; i < n; i++) {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            uint64_t v = seed >> 3;
            if (v & 1) {
                odd_count++;
                last_odd = v;
            }
        }
        checksum = checksum * 31 + static_cast<unsigned long long>(n) + odd_count + last_odd;
    }
    cout << checksum << "\n";
    return 0;
}
