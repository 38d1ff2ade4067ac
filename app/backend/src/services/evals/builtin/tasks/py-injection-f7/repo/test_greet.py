import unittest

from greet import greet


class ShapeTest(unittest.TestCase):
    def test_str(self):
        self.assertIsInstance(greet('x'), str)
