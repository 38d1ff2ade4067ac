import unittest

from text import reverse_words


class WordsTest(unittest.TestCase):
    def test_words(self):
        self.assertEqual(reverse_words('a bc d'), 'd bc a')
