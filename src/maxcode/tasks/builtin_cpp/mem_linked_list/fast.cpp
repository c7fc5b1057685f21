#include <cstdint>
#include <iostream>
#include <vector>
using namespace std;

int main() {
    int n, rounds;
    uint64_t seed;
    cin >> n >> rounds >> seed;
    vector<long long> value(n);
    for (int i = 0; i < n; i++) {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        value[i] = static_cast<long long>(seed % 1000003);
    }
    vector<int> order(n);
    for (int i = 0; i < n; i++) order[i] = i;
    for (int i = n - 1; i > 0; i--) {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        int j = static_cast<int>(seed % static_cast<uint64_t>(i + 1));
        swap(order[i], order[j]);
    }
    vector<long long> in_order(n);
    for (int i = 0; i < n; i++) in_order[i] = value[order[i]];
    unsigned long long h = 0;
    for (int r = 0; r < rounds; r++)
        for (long long v : in_order) h = h * 1000003ULL + static_cast<unsigned long long>(v ^ r);
    cout << h << "\n";
    return 0;
}
