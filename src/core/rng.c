/* Draws from distributions over a counter-based stream (rng.h). */
#include <math.h>
#include "rng.h"

double sl__rng_normal(sl__rng *r)
{
    double u = 1.0 - sl__rng_uniform(r); /* (0, 1]: log stays finite */
    double v = sl__rng_uniform(r);
    return sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v);
}

/* Marsaglia and Tsang's method; below shape 1, Gamma(shape + 1) scaled by
 * U^(1/shape). */
double sl__rng_gamma(sl__rng *r, double shape)
{
    if (shape < 1.0) {
        double u = 1.0 - sl__rng_uniform(r);
        return sl__rng_gamma(r, shape + 1.0) * pow(u, 1.0 / shape);
    }
    double d = shape - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x, v;
        do {
            x = sl__rng_normal(r);
            v = 1.0 + c * x;
        } while (v <= 0.0);
        v = v * v * v;
        double u = 1.0 - sl__rng_uniform(r);
        if (u < 1.0 - 0.0331 * x * x * x * x || log(u) < 0.5 * x * x + d * (1.0 - v + log(v)))
            return d * v;
    }
}

double sl__rng_beta(sl__rng *r, double a, double b)
{
    double x = sl__rng_gamma(r, a), y = sl__rng_gamma(r, b);
    return x + y > 0.0 ? x / (x + y) : 0.5; /* both underflow only for tiny shapes */
}
