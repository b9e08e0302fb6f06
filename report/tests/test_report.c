/* test_report.c -- swi_report without a browser: statistics against hand-counted boxes,
 * refusals, escaping, descriptors closed on every path, write errors reported. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "swi_report.h"

static int failures = 0;
#define CHECK(c, ...)                                               \
    do {                                                            \
        if (!(c)) {                                                 \
            failures++;                                             \
            fprintf(stderr, "%s:%d: %s: ", __FILE__, __LINE__, #c); \
            fprintf(stderr, __VA_ARGS__);                           \
            fputc('\n', stderr);                                    \
        }                                                           \
    } while (0)

enum { NI = 9, NJ = 7, NK = 5 };

static void page_of(swi_report_page *p, void *labels, int bytes) {
    memset(p, 0, sizeof *p);
    p->size[0] = NI, p->size[1] = NJ, p->size[2] = NK;
    p->affine[0][0] = 2, p->affine[1][1] = -3, p->affine[2][2] = 4, p->affine[3][3] = 1;
    p->affine[0][3] = 10;
    p->labels = labels;
    p->label_bytes = bytes;
}

static int fd_open(int fd) { return fcntl(fd, F_GETFD) != -1 || errno != EBADF; }

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) n = 0;
    if (b) b[n] = '\0';
    fclose(f);
    return b;
}

static void test_stats(void) {
    /* two boxes by hand, and a label beyond the classes asked for */
    static uint16_t lab[NI][NJ][NK];
    memset(lab, 0, sizeof lab);
    for (int i = 1; i <= 3; i++)
        for (int j = 2; j <= 4; j++)
            for (int k = 0; k <= 1; k++) lab[i][j][k] = 1;
    for (int i = 5; i <= 8; i++)
        for (int j = 0; j <= 6; j++) lab[i][j][4] = 300;
    lab[0][0][0] = 9; /* >= classes: not counted */
    swi_report_page p;
    page_of(&p, lab, 2);
    swi_report_class_stats st[301];
    char err[256] = "";
    CHECK(swi_report_stats(&p, 301, st, err, sizeof err) == SWI_OK, "%s", err);
    CHECK(st[1].voxels == 18, "%lld", (long long)st[1].voxels);
    CHECK(fabs(st[1].ml - 18 * 24 / 1000.0) < 1e-12, "%g", st[1].ml);
    CHECK(st[1].lo[0] == 1 && st[1].lo[1] == 2 && st[1].lo[2] == 0 && st[1].hi[0] == 3 && st[1].hi[1] == 4 &&
              st[1].hi[2] == 1,
          "box");
    /* the centroid (2, 3, 0.5): the nearest voxels (2,3,0) and (2,3,1) tie, the first wins */
    CHECK(st[1].at[0] == 2 && st[1].at[1] == 3 && st[1].at[2] == 0, "at %lld %lld %lld",
          (long long)st[1].at[0], (long long)st[1].at[1], (long long)st[1].at[2]);
    CHECK(st[300].voxels == 28 && st[300].lo[0] == 5 && st[300].hi[1] == 6 && st[300].lo[2] == 4,
          "class 300");
    CHECK(st[9].voxels == 1, "label 9 is a class below 301");
    /* the box in mm: x = 2 i + 10, y = -3 j, z = 4 k over the voxel centres */
    CHECK(st[1].mm_lo[0] == 12 && st[1].mm_hi[0] == 16 && st[1].mm_lo[1] == -12 && st[1].mm_hi[1] == -6 &&
              st[1].mm_lo[2] == 0 && st[1].mm_hi[2] == 4,
          "box in mm %g..%g %g..%g %g..%g", st[1].mm_lo[0], st[1].mm_hi[0], st[1].mm_lo[1], st[1].mm_hi[1],
          st[1].mm_lo[2], st[1].mm_hi[2]);
    CHECK(st[2].voxels == 0 && st[2].lo[0] == -1 && st[2].at[0] == -1 && st[2].ml == 0, "absent class");
    CHECK(st[0].voxels == NI * NJ * NK - 18 - 28 - 1, "background %lld", (long long)st[0].voxels);
    /* fewer classes: label 9 and 300 are left out */
    CHECK(swi_report_stats(&p, 2, st, err, sizeof err) == SWI_OK, "%s", err);
    CHECK(st[0].voxels == NI * NJ * NK - 18 - 28 - 1 && st[1].voxels == 18, "two classes");
}

static void test_refusals(void) {
    static uint8_t lab[NI][NJ][NK];
    swi_report_page p;
    char err[256];
    swi_report_class_stats st[4];
    page_of(&p, NULL, 1);
    CHECK(swi_report_stats(&p, 4, st, err, sizeof err) == SWI_ERR_INVALID_ARG && strstr(err, "no labels"),
          "%s", err);
    page_of(&p, lab, 3);
    CHECK(swi_report_stats(&p, 4, st, err, sizeof err) == SWI_ERR_INVALID_ARG && strstr(err, "1 or 2 bytes"),
          "%s", err);
    page_of(&p, lab, 1);
    p.size[1] = 0;
    CHECK(swi_report_stats(&p, 4, st, err, sizeof err) == SWI_ERR_INVALID_ARG && strstr(err, "axis 1"), "%s",
          err);
    page_of(&p, lab, 1);
    p.affine[1][2] = NAN;
    CHECK(swi_report_stats(&p, 4, st, err, sizeof err) == SWI_ERR_INVALID_ARG && strstr(err, "affine[1][2]"),
          "%s", err);
    page_of(&p, lab, 1);
    CHECK(swi_report_stats(&p, 0, st, err, sizeof err) == SWI_ERR_INVALID_ARG, "classes 0");
    p.size[0] = p.size[1] = p.size[2] = 1 << 20;
    CHECK(swi_report_stats(&p, 4, st, err, sizeof err) == SWI_ERR_INVALID_ARG && strstr(err, "too many"),
          "%s", err);

    /* no bundle: refused, naming how to install it, the descriptor closed */
    setenv("SWI_NIIVUE_JS", "/nonexistent/niivue.umd.js", 1);
    CHECK(swi_report_check(err, sizeof err) != SWI_OK && strstr(err, "install-deps.sh") &&
              strstr(err, "SWI_NIIVUE_JS") && strstr(err, "/nonexistent/niivue.umd.js"),
          "%s", err);
    page_of(&p, lab, 1);
    int fd = open("/dev/null", O_WRONLY);
    CHECK(swi_report_write_fd(fd, "x.html", &p, err, sizeof err) != SWI_OK && strstr(err, "install-deps.sh"),
          "%s", err);
    CHECK(!fd_open(fd), "fd left open after a refusal");
    /* bad labels: the descriptor closed too */
    fd = open("/dev/null", O_WRONLY);
    page_of(&p, lab, 4);
    CHECK(swi_report_write_fd(fd, "x.html", &p, err, sizeof err) == SWI_ERR_INVALID_ARG, "label_bytes 4");
    CHECK(!fd_open(fd), "fd left open after bad labels");
    fd = open("/dev/null", O_WRONLY);
    CHECK(swi_report_index_write_fd(fd, "i.html", NULL, NULL, 2, NULL, 0, err, sizeof err) ==
              SWI_ERR_INVALID_ARG,
          "index without cases");
    CHECK(!fd_open(fd), "fd left open by the index");
}

static void test_page(const char *dir) {
    char bundle[4096], out[4096];
    snprintf(bundle, sizeof bundle, "%s/fake-niivue.js", dir);
    snprintf(out, sizeof out, "%s/page.html", dir);
    FILE *f = fopen(bundle, "w");
    CHECK(f != NULL, "%s", bundle);
    if (!f) return;
    fputs("window.niivue = {}; /* niivue stand-in */\n", f);
    fclose(f);
    setenv("SWI_NIIVUE_JS", bundle, 1);
    char err[256] = "";
    CHECK(swi_report_check(err, sizeof err) == SWI_OK, "%s", err);

    static uint8_t lab[NI][NJ][NK];
    static float img[NI][NJ][NK];
    memset(lab, 0, sizeof lab);
    lab[4][3][2] = 2;
    for (int i = 0; i < NI; i++)
        for (int j = 0; j < NJ; j++)
            for (int k = 0; k < NK; k++) img[i][j][k] = (float)(i + j * k);
    img[0][0][0] = NAN; /* not finite: averaged out, not propagated */
    swi_report_page p;
    page_of(&p, lab, 1);
    p.image = &img[0][0][0];
    const char *names[3] = {"background", "a</script><script>x()</script>", NULL};
    p.names = names;
    p.classes = 3;
    p.title = "t&<b>";
    swi_report_item items[1] = {{"k\"ey", "va\\lue\n"}};
    p.summary = items;
    p.n_summary = 1;
    int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    CHECK(swi_report_write_fd(fd, out, &p, err, sizeof err) == SWI_OK, "%s", err);
    CHECK(!fd_open(fd), "fd left open after a page");
    char *html = slurp(out);
    CHECK(html != NULL, "%s", out);
    if (html) {
        CHECK(strstr(html, "window.niivue = {};") != NULL, "the bundle is inlined");
        CHECK(strstr(html, "<script id=\"swi-meta\"") && strstr(html, "<script id=\"swi-labels\"") &&
                  strstr(html, "<script id=\"swi-image\""),
              "data scripts");
        CHECK(strstr(html, "x()</script>") == NULL, "a class name ended a script element");
        CHECK(strstr(html, "a\\u003c/script\\u003e\\u003cscript\\u003ex()") != NULL, "class name escaped");
        CHECK(strstr(html, "\"t\\u0026\\u003cb\\u003e\"") != NULL, "title escaped");
        CHECK(strstr(html, "[\"k\\\"ey\",\"va\\\\lue\\u000a\"]") != NULL, "summary escaped");
        CHECK(strstr(html, "{\"label\":2,\"index\":2,\"name\":\"class 2\",\"rgb\"") != NULL,
              "a NULL name is \"class N\"");
        CHECK(strstr(html, "\"voxels\":1,") != NULL, "one voxel of class 2");
        CHECK(strstr(html, "NaN") == NULL && strstr(html, "nan") == NULL, "a NaN reached the page");
        free(html);
    }
    /* label values far apart (9000): the overlay's colour table has one entry per class
     * listed, each class an index into it; the classes absent and undeclared are not listed */
    static uint16_t wide[NI][NJ][NK];
    memset(wide, 0, sizeof wide);
    wide[1][1][1] = 9000;
    wide[2][2][2] = 7;
    page_of(&p, wide, 2);
    p.classes = 3;
    fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    CHECK(swi_report_write_fd(fd, out, &p, err, sizeof err) == SWI_OK, "%s", err);
    html = slurp(out);
    CHECK(html != NULL, "%s", out);
    if (html) {
        CHECK(strstr(html, "\"ncolors\":5,") != NULL, "a colour per class listed (0, 1, 2, 7, 9000)");
        CHECK(strstr(html, "{\"label\":9000,\"index\":4,") != NULL, "label 9000 is class index 4");
        CHECK(strstr(html, "{\"label\":7,\"index\":3,") != NULL, "label 7 is class index 3");
        CHECK(strstr(html, "{\"label\":2,\"index\":2,") != NULL, "declared class 2 listed");
        CHECK(strstr(html, "{\"label\":8,") == NULL, "an absent undeclared class listed");
        free(html);
    }

    /* a device that takes no bytes: the write error is reported, not a short page */
    fd = open("/dev/full", O_WRONLY);
    if (fd >= 0) {
        CHECK(swi_report_write_fd(fd, "/dev/full", &p, err, sizeof err) == SWI_ERR_IO &&
                  strstr(err, "cannot write"),
              "%s", err);
        CHECK(!fd_open(fd), "fd left open after a write error");
        fd = open("/dev/full", O_WRONLY);
        swi_report_case c = {"c", "c.html", 0, NULL, NULL, 1.0, NULL, NULL, 0};
        const char *cn[1] = {"liver"};
        CHECK(swi_report_index_write_fd(fd, "/dev/full", "t", &c, 1, cn, 1, err, sizeof err) == SWI_ERR_IO,
              "%s", err);
    }

    /* the index: names escaped, failed cases with their error, volumes per class */
    snprintf(out, sizeof out, "%s/index.html", dir);
    double ml[2] = {1.5, 0.25};
    static const unsigned char png[] = {0x89, 'P', 'N', 'G'};
    swi_report_case cases[2] = {{"a&b", "a%26b.html", 0, NULL, NULL, 2.5, ml, png, sizeof png},
                                {"<bad>", NULL, 1, NULL, "x.nii: not a \"NIfTI\" file", 0.1, NULL, NULL, 0}};
    const char *cn[2] = {"liver", "sp<leen"};
    fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    CHECK(swi_report_index_write_fd(fd, out, "scans/", cases, 2, cn, 2, err, sizeof err) == SWI_OK, "%s",
          err);
    html = slurp(out);
    if (html) {
        CHECK(strstr(html, ">a&amp;b</a>") && strstr(html, "href=\"a%26b.html\""), "case link");
        CHECK(strstr(html, "&lt;bad&gt;") && !strstr(html, "<bad>"), "case name escaped");
        CHECK(strstr(html, "not a &quot;NIfTI&quot; file"), "error escaped");
        CHECK(strstr(html, "sp&lt;leen (mL)"), "class name escaped");
        CHECK(strstr(html, "data-sort=\"1.5\">1.500</td>") && strstr(html, ">0.250</td>"), "volumes");
        CHECK(strstr(html, "data:image/png;base64,iVBORw==") != NULL, "thumbnail base64");
        CHECK(strstr(html, "2 cases, 1 failed") != NULL, "header");
        free(html);
    }
}

/* The bundle's lookup: $SWI_NIIVUE_JS, then the path a program sets, then the default. */
static void test_niivue_path(void) {
    setenv("SWI_NIIVUE_JS", "/env/niivue.umd.js", 1);
    CHECK(swi_report_set_niivue_path("/set/niivue.umd.js") == 0, "set");
    CHECK(strcmp(swi_report_niivue_path(), "/env/niivue.umd.js") == 0, "%s", swi_report_niivue_path());
    unsetenv("SWI_NIIVUE_JS");
    CHECK(strcmp(swi_report_niivue_path(), "/set/niivue.umd.js") == 0, "%s", swi_report_niivue_path());
    static char longer[8192];
    memset(longer, 'a', sizeof longer - 1);
    CHECK(swi_report_set_niivue_path(longer) == -1, "a path longer than PATH_MAX accepted");
    CHECK(swi_report_set_niivue_path(NULL) == 0, "unset");
    CHECK(strcmp(swi_report_niivue_path(), "/set/niivue.umd.js") != 0, "%s", swi_report_niivue_path());
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_report WORKDIR\n");
        return 2;
    }
    test_stats();
    test_niivue_path();
    test_refusals();
    test_page(argv[1]);
    if (failures) fprintf(stderr, "%d failures\n", failures);
    return failures != 0;
}
