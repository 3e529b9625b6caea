"""Whether one configuration is measurably faster than another on a noisy machine: paired rounds and a sign test.

Why: on a shared 2-core machine the same run of gpt bench measures anywhere in a +-20% band, in modes that last
seconds, so the medians of a few rounds cannot order candidates predicted within 1-2% of each other, and "the
best measured" among such candidates is whichever drew the quiet seconds. plan_check.py then races the
candidate that measured best outside the plan's top 3 against the best of the top 3 in fresh rounds, each round
timing both back to back (order alternating), and asks whether the first is faster in more rounds than chance
allows. The sign test assumes nothing about the noise's shape (it is bimodal here), only that in a round
neither candidate is favoured when they are equally fast.

  sign_test_greater(wins, n)  P(at least `wins` of n fair coin flips come up heads): one-sided p-value
  median_ci(xs, conf)         distribution-free confidence interval of the median (order statistics)
  race_verdict(a, b)          paired rounds of tokens/s of candidate a and b: wins, p, ratio and its interval
"""
import math
import statistics

ALPHA = 0.05  # one-sided: a contender is measurably faster when p < ALPHA


def binom_half_cdf(k, n):
    """P(Bin(n, 1/2) <= k)."""
    if k < 0:
        return 0.0
    return sum(math.comb(n, i) for i in range(0, min(k, n) + 1)) / 2 ** n


def sign_test_greater(wins, n):
    """One-sided sign test: P(Bin(n, 1/2) >= wins)."""
    if n < 1 or not 0 <= wins <= n:
        raise ValueError(f"sign test: need 0 <= wins <= n and n >= 1, got wins={wins}, n={n}")
    return 1.0 - binom_half_cdf(wins - 1, n)


def median_ci(xs, conf=0.95):
    """(lo, hi, coverage): the order statistics x(j), x(n-j+1) with j the largest rank whose interval still
    covers the median with probability >= conf; (min, max, coverage) when no narrower one does."""
    xs = sorted(xs)
    n = len(xs)
    if n < 1:
        raise ValueError("median_ci: no values")
    j = 1
    while j + 1 <= (n + 1) // 2 and binom_half_cdf(j, n) <= (1 - conf) / 2:
        j += 1
    return xs[j - 1], xs[n - j], 1 - 2 * binom_half_cdf(j - 1, n)


def race_verdict(a, b):
    """a, b: tokens/s of two candidates in the same paired rounds. Whether a is measurably faster than b."""
    if len(a) != len(b) or not a:
        raise ValueError(f"race: need the same number of rounds for both, got {len(a)} and {len(b)}")
    ratios = [x / y for x, y in zip(a, b)]
    wins = sum(1 for r in ratios if r > 1)
    p = sign_test_greater(wins, len(ratios))
    lo, hi, cover = median_ci(ratios)
    return {"rounds": len(ratios), "wins": wins, "p": p, "faster": p < ALPHA,
            "ratio": statistics.median(ratios), "ratio_lo": lo, "ratio_hi": hi, "coverage": cover}
