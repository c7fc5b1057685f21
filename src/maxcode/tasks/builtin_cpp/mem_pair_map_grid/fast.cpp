#include <iostream>
#include <string>
#include <vector>
using namespace std;

int main() {
    ios::sync_with_stdio(false);
    cin.tie(nullptr);
    int h, w;
    cin >> h >> w;
    vector<string> grid(h);
    for (int i = 0; i < h; i++) cin >> grid[i];
    const long long mod = 1000000007LL;
    vector<long long> ways(static_cast<size_t>(w), 0);
    for (int i = 0; i < h; i++) {
        for (int j = 0; j < w; j++) {
            if (grid[i][j] == '#') {
                ways[j] = 0;
                continue;
            }
            long long v = (i == 0 && j == 0) ? 1 : 0;
            if (i > 0) v += ways[j];
            if (j > 0) v += ways[j - 1];
            ways[j] = v % mod;
        }
    }
    cout << ways[w - 1] << "\n";
    return 0;
}
