#include <cstdint>
#include <iostream>
#include <vector>
using namespace std;

int main() {
    int n, rounds;
    uint64_t seed;
    cin >> n >> rounds >> seed;
    vector<vector<int>> a(n, vector<int>(n));
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            a[i][j] = static_cast<int>(seed & 1023);
        }
    long long checksum = 0;
    for (int r = 0; r < rounds; r++) {
        for (int j = 0; j < n; j++) {
            for (int i = 0; i < n; i++) {
                checksum += a[i][j] ^ r;
            }
        }
    }
    cout << checksum << "\n";
    return 0;
}
