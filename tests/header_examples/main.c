/* The examples are linked, not run (they need files and models): an empty main makes each
 * an executable, so every function an example calls must exist in its library. */
int main(void) { return 0; }
