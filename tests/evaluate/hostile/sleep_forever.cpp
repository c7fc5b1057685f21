// Sleeps forever without using CPU: only the wall-clock limit stops it.
#include <unistd.h>
int main() {
    for (;;) pause();
}
