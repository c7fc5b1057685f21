#include <iostream>
#include <vector>
using namespace std;

int main() {
    ios::sync_with_stdio(false);
    cin.tie(nullptr);
    int n, q;
    cin >> n >> q;
    vector<long long> prefix(n + 1, 0);
    for (int i = 0; i < n; i++) {
        long long x;
        cin >> x;
        prefix[i + 1] = prefix[i] + x;
    }
    for (int t = 0; t < q; t++) {
        int l, r;
        cin >> l >> r;
        cout << prefix[r + 1] - prefix[l] << "\n";
    }
    return 0;
}
