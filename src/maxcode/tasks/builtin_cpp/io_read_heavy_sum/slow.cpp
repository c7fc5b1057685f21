#include <iostream>
using namespace std;

int main() {
    int n;
    cin >> n;
    long long sum = 0, best = -(1LL << 62);
    unsigned long long mix = 0;
    for (int i = 0; i < n; i++) {
        long long x;
        cin >> x;
        sum += x;
        if (x > best) best = x;
        mix = mix * 1000003ULL + static_cast<unsigned long long>(x);
    }
    cout << sum << " " << best << " " << mix << "\n";
    return 0;
}
