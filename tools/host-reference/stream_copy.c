/* STREAM-style copy: the independent reference for hwceiling's host RAM path (Path 7).
 *
 * c[i] = a[i] over doubles with an OpenMP static schedule, arrays first-touched in parallel
 * by the same threads, REPS timed repetitions after one untimed. Prints the median and the
 * best in GB/s of bytes copied (N bytes copied count N, as hwceiling counts them).
 *
 *   gcc -O3 -march=native -fopenmp stream_copy.c -o stream_copy
 *   OMP_NUM_THREADS=8 OMP_PROC_BIND=spread OMP_PLACES=cores ./stream_copy 1073741824 20
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

int main(int argc, char **argv) {
    size_t bytes = argc > 1 ? strtoull(argv[1], NULL, 10) : (1UL << 30);
    int reps = argc > 2 ? atoi(argv[2]) : 20;
    size_t n = bytes / sizeof(double);
    double *a = aligned_alloc(1 << 21, n * sizeof(double));
    double *c = aligned_alloc(1 << 21, n * sizeof(double));
    double *gbps = malloc(sizeof(double) * (size_t)reps);
    if (!a || !c || !gbps || reps < 1) {
        fprintf(stderr, "allocation failed or bad arguments\n");
        return 1;
    }
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        a[i] = (double)i;
        c[i] = 0.0;
    }
    for (int r = -1; r < reps; r++) {
        double t0 = omp_get_wtime();
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++)
            c[i] = a[i];
        double t = omp_get_wtime() - t0;
        if (r >= 0)
            gbps[r] = (double)(n * sizeof(double)) / t / 1e9;
    }
    for (size_t i = 0; i < n; i += n / 7 + 1)
        if (c[i] != a[i]) {
            fprintf(stderr, "copy mismatch at %zu\n", i);
            return 1;
        }
    qsort(gbps, (size_t)reps, sizeof(double), cmp);
    printf("threads=%d bytes=%zu reps=%d median_gbps=%.3f best_gbps=%.3f min_gbps=%.3f\n",
           omp_get_max_threads(), n * sizeof(double), reps, gbps[reps / 2], gbps[reps - 1], gbps[0]);
    free(a);
    free(c);
    free(gbps);
    return 0;
}
