#include <cstdint>
#include <iostream>
#include <vector>
using namespace std;

// Open addressing with linear probing; the table is at least twice the number of keys.
struct CountTable {
    vector<long long> keys;
    vector<int> counts;
    size_t mask;
    explicit CountTable(size_t n) {
        size_t size = 1;
        while (size < 2 * n + 2) size <<= 1;
        keys.assign(size, -1);
        counts.assign(size, 0);
        mask = size - 1;
    }
    size_t slot(long long key) const {
        size_t h = static_cast<size_t>(key) * 0x9E3779B97F4A7C15ULL >> 20;
        while (keys[h & mask] != -1 && keys[h & mask] != key) h++;
        return h & mask;
    }
};

int main() {
    int n, q;
    uint64_t seed;
    cin >> n >> q >> seed;
    CountTable table(static_cast<size_t>(n));
    long long distinct = 0;
    for (int i = 0; i < n; i++) {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        long long key = static_cast<long long>(seed % 2000000ULL);
        size_t s = table.slot(key);
        if (table.keys[s] == -1) {
            table.keys[s] = key;
            distinct++;
        }
        table.counts[s]++;
    }
    unsigned long long answer = 0;
    for (int t = 0; t < q; t++) {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        size_t s = table.slot(static_cast<long long>(seed % 2000000ULL));
        answer = answer * 1000003ULL + static_cast<unsigned long long>(table.counts[s]);
    }
    cout << distinct << " " << answer << "\n";
    return 0;
}
