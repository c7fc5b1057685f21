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
        vector<uint64_t> values;
        for (int i = 0; i < n; i++) {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            values.push_back(seed >> 3);
        }
        vector<uint64_t> odd;
        for (int i = 0; i < n; i++) {
            if (values[i] & 1) odd.push_back(values[i]);
        }
        checksum = checksum * 31 + values.size() + odd.size() + (odd.empty() ? 0 : odd.back());
    }
    cout << checksum << "\n";
    return 0;
}
