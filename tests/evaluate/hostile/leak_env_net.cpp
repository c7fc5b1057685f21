// Answers correctly only if it sees no secrets in its environment and cannot reach the
// host's loopback server (port baked in by the test); any leak makes the answer wrong.
#include <arpa/inet.h>
#include <cstdio>
#include <cstdlib>
#include <sys/socket.h>
#include <unistd.h>
int main() {
    if (getenv("HOME") || getenv("MAXCODE_TEST_SECRET")) puts("LEAK env");
    int s = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(HOST_PORT);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (s >= 0 && connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) puts("LEAK net");
    int n; scanf("%d", &n);
    long long total = 0, x;
    for (int i = 0; i < n; ++i) { scanf("%lld", &x); total += x; }
    printf("%lld\n", total);
}
