#include <algorithm>
#include <iostream>
#include <vector>
using namespace std;

int main() {
    ios::sync_with_stdio(false);
    cin.tie(nullptr);
    int n;
    cin >> n;
    vector<int> a(n);
    for (int i = 0; i < n; i++) cin >> a[i];
    vector<int> sorted_values(a);
    sort(sorted_values.begin(), sorted_values.end());
    sorted_values.erase(unique(sorted_values.begin(), sorted_values.end()), sorted_values.end());
    int m = static_cast<int>(sorted_values.size());
    vector<int> tree(m + 1, 0);
    long long inversions = 0;
    for (int i = n - 1; i >= 0; i--) {
        int r = static_cast<int>(lower_bound(sorted_values.begin(), sorted_values.end(), a[i]) - sorted_values.begin());
        for (int k = r; k > 0; k -= k & -k) inversions += tree[k];
        for (int k = r + 1; k <= m; k += k & -k) tree[k]++;
    }
    cout << inversions << "\n";
    return 0;
}
