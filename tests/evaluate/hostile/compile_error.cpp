#include <cstdio>
int main() { undeclared_function(); }
