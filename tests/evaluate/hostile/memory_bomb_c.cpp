// C-style memory bomb: malloc until NULL, then writes through the NULL pointer.
#include <cstdlib>
#include <cstring>
int main() {
    for (;;) {
        char* p = static_cast<char*>(malloc(32 << 20));
        memset(p, 1, 32 << 20);
    }
}
