#!/usr/bin/env python3
"""scripts/scaling/paired_race.py against closed forms: the sign test's tail is a sum of binomial coefficients
over 2^n, and the median's order-statistic interval for n = 20 at 95% is x(6)..x(15) (P(Bin(20, 1/2) <= 5) =
21700 / 2^20 = 0.0207 <= 0.025 < P(<= 6) = 60460 / 2^20). The race's verdict must say "faster" only when the
wins are past what chance allows, and must be able to say it.

  test_paired_race.py
"""
import os
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts", "scaling"))
import paired_race as pr  # noqa: E402
import plan_check  # noqa: E402


class SignTest(unittest.TestCase):
    def test_tails_are_the_binomial_sums(self):
        self.assertAlmostEqual(pr.sign_test_greater(5, 5), 1 / 32)
        self.assertAlmostEqual(pr.sign_test_greater(0, 7), 1.0)
        # C(20,15..20) = 15504 + 4845 + 1140 + 190 + 20 + 1
        self.assertAlmostEqual(pr.sign_test_greater(15, 20), 21700 / 2 ** 20)
        self.assertAlmostEqual(pr.sign_test_greater(14, 20), (21700 + 38760) / 2 ** 20)

    def test_bad_counts_are_refused(self):
        for wins, n in ((3, 2), (-1, 4), (0, 0)):
            with self.assertRaises(ValueError):
                pr.sign_test_greater(wins, n)


class MedianInterval(unittest.TestCase):
    def test_twenty_values_give_the_sixth_and_fifteenth(self):
        lo, hi, cover = pr.median_ci(list(range(20, 0, -1)))  # unsorted on purpose: 1..20
        self.assertEqual((lo, hi), (6, 15))
        self.assertAlmostEqual(cover, 1 - 2 * 21700 / 2 ** 20)

    def test_too_few_values_give_the_range_and_say_its_coverage(self):
        lo, hi, cover = pr.median_ci([3.0, 1.0, 2.0, 5.0, 4.0])
        self.assertEqual((lo, hi), (1.0, 5.0))
        self.assertAlmostEqual(cover, 1 - 2 / 32)


class Race(unittest.TestCase):
    def test_faster_in_15_of_20_rounds_is_measurably_faster(self):
        b = [100.0] * 20
        a = [101.0] * 15 + [99.0] * 5
        v = pr.race_verdict(a, b)
        self.assertEqual(v["wins"], 15)
        self.assertTrue(v["faster"])
        self.assertAlmostEqual(v["ratio"], 1.01)

    def test_faster_in_14_of_20_rounds_is_not(self):
        b = [100.0] * 20
        a = [130.0] * 14 + [99.0] * 6  # large gains in 14 rounds still are 14 of 20
        v = pr.race_verdict(a, b)
        self.assertEqual(v["wins"], 14)
        self.assertFalse(v["faster"])
        self.assertLess(v["ratio_lo"], 1.0)

    def test_rounds_must_pair(self):
        with self.assertRaises(ValueError):
            pr.race_verdict([1.0, 2.0], [1.0])


class PlanCheckVerdict(unittest.TestCase):
    """plan_check.py's race and verdict with gpt bench replaced by fixed speeds per candidate."""

    def scenario(self, speeds):
        cands = [{"source": f"plan #{i + 1}", "rank": i + 1, "flags": f"-B {i}", "tp": 1, "tokens_per_s": 1.0,
                  "device_need_bytes": 0} for i in range(5)]
        cands.append({"source": "feasible sample", "rank": 0, "flags": "-B 9 --tp 2", "tp": 2, "tokens_per_s": 1.0,
                      "device_need_bytes": 0})
        for x, v in zip(cands, speeds):
            x["measured"], x["measured_median"], x["steps"] = [v], v, 1
        return {"scenario": ("s", "d2", 2, 32, 32, None), "budget": None, "cands": cands,
                "plan": {"stats": {"search_s": 0.0, "space": 6}}}

    def run_race(self, p, race_speed):
        class A:
            race_rounds = 20
        real = plan_check.measure, plan_check.c.progress
        plan_check.measure = lambda a, sc, x, log, cache: race_speed(x, len(x["race"]))
        plan_check.c.progress = lambda *args: None
        try:
            p["race"] = plan_check.race(A, p, None, None)
        finally:
            plan_check.measure, plan_check.c.progress = real
        return plan_check.verdicts([p])[1][0]

    def test_best_in_the_top_3_needs_no_race(self):
        p = self.scenario([100, 99, 101, 98, 97, 90])
        check = self.run_race(p, lambda x, r: self.fail("raced"))
        self.assertEqual((check["best_in_top_3"], check["pass"]), ("in the top 3", "yes"))

    def test_a_contender_faster_in_every_round_fails_the_scenario(self):
        p = self.scenario([100, 99, 101, 98, 104, 90])  # plan #5 measured best; #3 is the top 3's best
        check = self.run_race(p, lambda x, r: 103.0 if x["rank"] == 5 else 100.0)
        self.assertTrue(check["best_in_top_3"].startswith("NO"))
        self.assertEqual(check["pass"], "NO")
        self.assertIn("plan #5 against plan #3: faster in 20 of 20", check["race"])

    def test_a_contender_faster_in_half_the_rounds_is_a_tie(self):
        p = self.scenario([100, 99, 101, 98, 104, 90])
        check = self.run_race(p, lambda x, r: 100.0 + (1 if (r % 2) == (x["rank"] == 5) else 0))
        self.assertTrue(check["best_in_top_3"].startswith("tie"))
        self.assertEqual(check["pass"], "yes")

    def test_the_verdict_names_the_first_and_the_best_tensor_parallel_size(self):
        p = self.scenario([100, 99, 101, 98, 97, 110])  # the sample (--tp 2) measured best
        check = self.run_race(p, lambda x, r: 110.0 if x["rank"] == 0 else 100.0)
        self.assertEqual((check["first_tp"], check["best_tp"]), (1, 2))
        self.assertEqual(check["pass"], "NO")


if __name__ == "__main__":
    unittest.main()
