// Grows a vector until allocation fails (touches every page it gets).
#include <vector>
#include <cstdio>
int main() {
    std::vector<std::vector<char>> blocks;
    for (;;) blocks.emplace_back(64 << 20, 'x');
}
