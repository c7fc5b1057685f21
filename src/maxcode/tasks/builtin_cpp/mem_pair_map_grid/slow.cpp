#include <iostream>
#include <map>
#include <string>
#include <utility>
using namespace std;

int main() {
    ios::sync_with_stdio(false);
    cin.tie(nullptr);
    int h, w;
    cin >> h >> w;
    map<pair<int, int>, bool> blocked;
    for (int i = 0; i < h; i++) {
        string row;
        cin >> row;
        for (int j = 0; j < w; j++) blocked[{i, j}] = row[j] == '#';
    }
    const long long mod = 1000000007LL;
    map<pair<int, int>, long long> ways;
    for (int i = 0; i < h; i++) {
        for (int j = 0; j < w; j++) {
            long long v = 0;
            if (!blocked[{i, j}]) {
                if (i == 0 && j == 0) v = 1;
                if (i > 0) v += ways[{i - 1, j}];
                if (j > 0) v += ways[{i, j - 1}];
            }
            ways[{i, j}] = v % mod;
        }
    }
    cout << ways[{h - 1, w - 1}] << "\n";
    return 0;
}
