#include <cstdint>
#include <iostream>
#include <vector>
using namespace std;

int main() {
    int n;
    uint64_t seed;
    cin >> n >> seed;
    vector<vector<int>> a(n, vector<int>(n)), b(n, vector<int>(n)), c(n, vector<int>(n, 0));
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            a[i][j] = static_cast<int>(seed >> 54);
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            b[i][j] = static_cast<int>(seed >> 54);
        }
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++) {
            for (int k = 0; k < n; k++) {
                c[i][j] += a[i][k] * b[k][j];
            }
        }
    }
    unsigned long long checksum = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) checksum = checksum * 31 + static_cast<unsigned long long>(c[i][j]);
    cout << checksum << "\n";
    return 0;
}
