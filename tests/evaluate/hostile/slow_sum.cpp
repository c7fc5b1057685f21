// Reference: sums n integers, re-adding each prefix (O(n^2)) before printing the total.
#include <cstdio>
#include <vector>
int main() {
    int n;
    if (scanf("%d", &n) != 1) return 1;
    std::vector<long long> a(n);
    for (auto& x : a) scanf("%lld", &x);
    long long total = 0;
    for (int i = 0; i < n; ++i) {
        long long prefix = 0;
        for (int j = 0; j <= i; ++j) prefix += a[j];
        if (i == n - 1) total = prefix;
    }
    printf("%lld\n", total);
}
