#include <cstdint>
#include <iostream>
#include <vector>
using namespace std;

int main() {
    int n, rounds;
    uint64_t seed;
    cin >> n >> rounds >> seed;
    vector<int> a(static_cast<size_t>(n) * n);
    for (size_t k = 0; k < a.size(); k++) {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        a[k] = static_cast<int>(seed & 1023);
    }
    long long checksum = 0;
    for (int r = 0; r < rounds; r++) {
        long long s = 0;
        for (int v : a) s += v ^ r;
        checksum += s;
    }
    cout << checksum << "\n";
    return 0;
}
