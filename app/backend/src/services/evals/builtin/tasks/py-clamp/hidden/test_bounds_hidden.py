import unittest

from bounds import clamp


class ClampTest(unittest.TestCase):
    def test_high(self):
        self.assertEqual(clamp(11, 0, 10), 10)

    def test_inside(self):
        self.assertEqual(clamp(5, 0, 10), 5)
