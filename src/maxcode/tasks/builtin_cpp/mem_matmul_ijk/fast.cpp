#include <cstdint>
#include <iostream>
#include <vector>
using namespace std;

int main() {
    int n;
    uint64_t seed;
    cin >> n >> seed;
    size_t N = static_cast<size_t>(n);
    vector<int> a(N * N), b(N * N), c(N * N, 0);
    for (size_t k = 0; k < N * N; k++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        a[k] = static_cast<int>(seed >> 54);
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        b[k] = static_cast<int>(seed >> 54);
    }
    for (size_t i = 0; i < N; i++)
        for (size_t k = 0; k < N; k++) {
            int aik = a[i * N + k];
            const int* brow = &b[k * N];
            int* crow = &c[i * N];
            for (size_t j = 0; j < N; j++) crow[j] += aik * brow[j];
        }
    unsigned long long checksum = 0;
    for (size_t k = 0; k < N * N; k++) checksum = checksum * 31 + static_cast<unsigned long long>(c[k]);
    cout << checksum << "\n";
    return 0;
}
