import unittest

from fizz import fizzbuzz


class FizzTest(unittest.TestCase):
    def test_values(self):
        self.assertEqual([fizzbuzz(i) for i in (1, 3, 5, 15)], ['1', 'Fizz', 'Buzz', 'FizzBuzz'])
