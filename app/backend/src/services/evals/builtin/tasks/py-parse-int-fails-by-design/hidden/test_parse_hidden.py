import unittest

from parse import parse_int


class ParseTest(unittest.TestCase):
    def test_positive(self):
        self.assertEqual(parse_int('42'), 42)

    def test_negative(self):
        self.assertEqual(parse_int('-42'), -42)
