#include <iostream>
#include <vector>
using namespace std;

int main() {
    ios::sync_with_stdio(false);
    cin.tie(nullptr);
    int n;
    cin >> n;
    vector<long long> seen;
    long long total = 0;
    for (int i = 0; i < n; i++) {
        long long x;
        cin >> x;
        bool found = false;
        for (size_t j = 0; j < seen.size(); j++) {
            if (seen[j] == x) {
                found = true;
                break;
            }
        }
        if (!found) {
            seen.push_back(x);
            total += x;
        }
    }
    cout << seen.size() << " " << total << "\n";
    return 0;
}
