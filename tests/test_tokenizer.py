"""The family's byte-level BPE tokenizer: round trip, vocabulary, determinism."""
import json

from hypothesis import given, strategies as st

from engine.tokenizer import EOT, TOKENIZER, VOCAB_SIZE, Tokenizer, load_tokenizer, train

TOK = load_tokenizer()
SAMPLE = ["def f(x):\n    return x + 1\n\n", "Thou art more lovely and more temperate.\n", "x_1 = 123456 # ok\n"] * 5


@given(st.text())
def test_round_trip_any_unicode(s):
    ids = TOK.encode(s)
    assert all(0 <= i < TOK.vocab_size and i != TOK.eot for i in ids)
    assert TOK.decode(ids) == s
    assert "".join(TOK.pieces(s)) == s  # pre-tokenization drops nothing


@given(st.lists(st.sampled_from(["    ", "\n", " def", "self", "_", "é", "😀", "'s", "123", "\t", "--", "\r\n", " "]),
                max_size=30))
def test_round_trip_code_like(parts):
    s = "".join(parts)
    assert TOK.decode(TOK.encode(s)) == s


def test_committed_tokenizer():
    assert TOK.vocab_size == VOCAB_SIZE == len(TOK.vocab) + 1
    assert TOK.special == {EOT: VOCAB_SIZE - 1}
    assert len(set(TOK.vocab)) == len(TOK.vocab)  # every merge makes a new byte string
    assert Tokenizer.from_json(TOKENIZER.read_text()).merges == TOK.merges
    assert TOK.to_json() == TOKENIZER.read_text()  # the file is the canonical form
    assert json.loads(TOKENIZER.read_text())["vocab_size"] == VOCAB_SIZE
    assert TOK.encode(EOT) != [TOK.eot] and TOK.decode([TOK.eot]) == EOT


def test_compresses_both_domains():
    code = "    def __init__(self, name, value=None):\n        self.name = name\n        return self.value\n"
    text = "To be, or not to be, that is the question:\nWhether 'tis nobler in the mind to suffer\n"
    for s in (code, text):
        assert len(s.encode()) / len(TOK.encode(s)) > 2.5


def test_training_is_deterministic_and_order_free():
    a = train(SAMPLE, vocab_size=256 + 1 + 40)
    b = train(list(reversed(SAMPLE)), vocab_size=256 + 1 + 40)
    assert a.merges == b.merges and len(a.merges) == 40 and a.vocab_size == 297
    assert a.to_json() == b.to_json()
    s = "".join(SAMPLE)
    assert a.decode(a.encode(s)) == s
    assert len(a.encode(s)) < len(s.encode()) / 2
    assert Tokenizer.from_json(a.to_json()).encode(s) == a.encode(s)


def test_merges_apply_in_rank_order():
    # merges: (a,b) -> 256, (b,c) -> 257: "abc" takes the earlier merge first
    tok = Tokenizer([(97, 98), (98, 99), (256, 99)])
    assert tok.encode("abc") == [258] and tok.encode("bc") == [257] and tok.encode("abab") == [256, 256]
