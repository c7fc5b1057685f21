#include <cstdint>
#include <iostream>
#include <vector>
using namespace std;

int main() {
    ios::sync_with_stdio(false);
    cin.tie(nullptr);
    int n, capacity;
    long long mod;
    cin >> n >> capacity >> mod;
    vector<int> weight(n);
    for (int i = 0; i < n; i++) cin >> weight[i];
    const uint32_t m = static_cast<uint32_t>(mod);
    vector<uint32_t> ways(capacity + 1, 0);
    ways[0] = 1 % m;
    for (int i = 0; i < n; i++) {
        const int w = weight[i];
        for (int c = capacity; c >= w; c--) {
            uint32_t v = ways[c] + ways[c - w];
            ways[c] = v >= m ? v - m : v;
        }
    }
    uint64_t total = 0;
    for (int c = 0; c <= capacity; c++) total += ways[c];
    cout << ways[capacity] << " " << total % m << "\n";
    return 0;
}
