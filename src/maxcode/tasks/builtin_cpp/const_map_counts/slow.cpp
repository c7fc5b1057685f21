#include <cstdint>
#include <iostream>
#include <map>
using namespace std;

int main() {
    int n, q;
    uint64_t seed;
    cin >> n >> q >> seed;
    map<long long, int> count;
    for (int i = 0; i < n; i++) {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        count[static_cast<long long>(seed % 2000000ULL)]++;
    }
    unsigned long long answer = 0;
    for (int t = 0; t < q; t++) {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        long long x = static_cast<long long>(seed % 2000000ULL);
        int c = count.count(x) ? count[x] : 0;
        answer = answer * 1000003ULL + static_cast<unsigned long long>(c);
    }
    cout << count.size() << " " << answer << "\n";
    return 0;
}
