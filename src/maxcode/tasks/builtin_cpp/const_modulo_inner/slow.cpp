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
    vector<long long> ways(capacity + 1, 0);
    ways[0] = 1;
    for (int i = 0; i < n; i++)
        for (int c = capacity; c >= weight[i]; c--) ways[c] = (ways[c] + ways[c - weight[i]]) % mod;
    long long total = 0;
    for (int c = 0; c <= capacity; c++) total = (total + ways[c]) % mod;
    cout << ways[capacity] << " " << total << "\n";
    return 0;
}
