#include <algorithm>
#include <cstdint>
#include <iostream>
#include <vector>
using namespace std;

long long count_at_most(vector<long long> sorted_values, long long x) {
    return upper_bound(sorted_values.begin(), sorted_values.end(), x) - sorted_values.begin();
}

int main() {
    int n, q;
    uint64_t seed;
    cin >> n >> q >> seed;
    vector<long long> values(n);
    for (int i = 0; i < n; i++) {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        values[i] = static_cast<long long>(seed % 1000000000ULL);
    }
    sort(values.begin(), values.end());
    unsigned long long answer = 0;
    for (int t = 0; t < q; t++) {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        long long x = static_cast<long long>(seed % 1000000000ULL);
        answer = answer * 1000003ULL + static_cast<unsigned long long>(count_at_most(values, x));
    }
    cout << answer << "\n";
    return 0;
}
