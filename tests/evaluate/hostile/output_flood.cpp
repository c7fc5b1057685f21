// Prints forever.
#include <cstdio>
int main() {
    for (;;) fputs("flood flood flood flood flood flood flood flood\n", stdout);
}
