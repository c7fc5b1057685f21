// Off by one: drops the last number.
#include <cstdio>
int main() {
    int n;
    scanf("%d", &n);
    long long total = 0, x;
    for (int i = 0; i < n - 1; ++i) { scanf("%lld", &x); total += x; }
    printf("%lld\n", total);
}
