// Dereferences a null pointer: SIGSEGV.
#include <cstdio>
int main() {
    volatile int* p = nullptr;
    *p = 42;
    printf("%d\n", *p);
}
