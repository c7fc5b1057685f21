#include <cstdint>
#include <iostream>
#include <vector>
using namespace std;

struct Node {
    long long value;
    Node* next;
};

int main() {
    int n, rounds;
    uint64_t seed;
    cin >> n >> rounds >> seed;
    vector<Node*> nodes(n);
    for (int i = 0; i < n; i++) {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        nodes[i] = new Node{static_cast<long long>(seed % 1000003), nullptr};
    }
    vector<int> order(n);
    for (int i = 0; i < n; i++) order[i] = i;
    for (int i = n - 1; i > 0; i--) {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        int j = static_cast<int>(seed % static_cast<uint64_t>(i + 1));
        swap(order[i], order[j]);
    }
    for (int i = 0; i + 1 < n; i++) nodes[order[i]]->next = nodes[order[i + 1]];
    Node* head = nodes[order[0]];
    unsigned long long h = 0;
    for (int r = 0; r < rounds; r++)
        for (Node* p = head; p != nullptr; p = p->next) h = h * 1000003ULL + static_cast<unsigned long long>(p->value ^ r);
    cout << h << "\n";
    for (Node* p : nodes) delete p;
    return 0;
}
