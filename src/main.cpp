// gpt: command-line entry point (subcommands are dispatched in src/cli).
#include <cstdio>
int main() { std::puts("gpt"); return 0; }
