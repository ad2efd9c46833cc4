"""Generates examples/data/corpus.txt: an original, English-like text about the
invented river town of Halloway, produced by a seeded probabilistic grammar.

The output is deterministic (random.Random with a fixed seed; only choice,
random and randint are used, whose results are stable across Python versions),
so ``python examples/data/make_corpus.py --check`` can confirm that the
committed corpus matches this generator. The text is written from scratch by
the templates below; no existing text is copied.

Usage: python examples/data/make_corpus.py [--out PATH] [--kib 300] [--check]
"""

import argparse
import os
import random
import sys

SEED = 20261121

PEOPLE = [
    ("Ada", "she"), ("Bram", "he"), ("Corin", "he"), ("Della", "she"), ("Edwin", "he"), ("Fenna", "she"),
    ("Gideon", "he"), ("Hester", "she"), ("Ivo", "he"), ("Juna", "she"), ("Kasper", "he"), ("Lotte", "she"),
    ("Milo", "he"), ("Nell", "she"), ("Otto", "he"), ("Pim", "he"), ("Rosa", "she"), ("Silas", "he"),
    ("Tilde", "she"), ("Ulric", "he"), ("Vera", "she"), ("Wim", "he"), ("Yara", "she"), ("Zeb", "he"),
]
TRADES = [
    "baker", "ferryman", "miller", "clockmaker", "schoolteacher", "fisherman", "weaver", "carpenter",
    "beekeeper", "postmistress", "blacksmith", "lamplighter", "gardener", "innkeeper", "potter", "shepherd",
    "bookbinder", "boatwright", "cheesemaker", "glazier", "chandler", "cooper", "herbalist", "mapmaker",
]
PLACES = [
    "the old mill", "the market square", "the stone bridge", "the bakery on Crane Lane", "the harbour wall",
    "the little school", "the chapel on the hill", "the Gilded Heron inn", "the orchard", "the ferry landing",
    "the clock tower", "the post office", "the east meadow", "the willow path", "the boatyard",
    "the library", "the town hall", "the lighthouse", "the salt marsh", "the birch wood", "the weir",
    "the cider barn", "the north road", "the potter's yard",
]
TOWN = "Halloway"
RIVER = "the Tessel"
OBJECTS = [
    "a basket of apples", "a loaf of rye bread", "a brass lantern", "a bundle of letters", "a new fishing net",
    "a jar of honey", "a wooden chair", "a pair of boots", "a broken clock", "a map of the marsh",
    "a sack of flour", "a coil of rope", "a blue teapot", "a box of candles", "a wheel of cheese",
    "a bolt of green cloth", "a crate of pears", "a silver key", "a book of songs", "a kettle",
    "a handful of seeds", "a painted sign", "a bag of nails", "a warm scarf",
]
ANIMALS = ["the grey cat", "a flock of geese", "the miller's dog", "two old horses", "a heron", "the goats",
           "a family of ducks", "the bees", "a young fox", "the sheep", "an owl", "the crows"]
WEATHER = [
    "it rained softly all morning", "the fog lay thick on the river", "the wind came hard from the sea",
    "the sun was bright and warm", "a light snow had fallen", "the sky was low and grey",
    "a storm rolled in from the west", "the air smelled of cut grass", "the frost made the roofs white",
    "the evening was calm and clear",
]
TIMES = ["At dawn", "In the morning", "Before noon", "At midday", "In the afternoon", "Toward evening",
         "At dusk", "Late at night", "On market day", "On the first day of spring", "At the end of summer",
         "In the depth of winter", "Early on Sunday", "After the harvest"]
FEELINGS = ["glad", "tired", "worried", "proud", "curious", "hungry", "cheerful", "restless", "quiet",
            "surprised", "thankful", "sleepy"]
ADJ = ["small", "old", "narrow", "busy", "quiet", "crooked", "bright", "muddy", "steep", "sunny", "cold",
       "crowded", "peaceful", "windy"]
VERBS_PAST = [("carried", "to"), ("brought", "to"), ("took", "to"), ("sold", "at"), ("found", "near"),
              ("mended", "at"), ("left", "at"), ("hid", "behind"), ("painted", "at"), ("lost", "near")]
WALK = ["walked", "hurried", "wandered", "rode", "ran", "strolled", "climbed", "went"]
SAY = ["said", "asked", "called", "whispered", "laughed", "answered", "muttered", "shouted"]
EVENTS = ["the spring fair", "the harvest supper", "the boat race", "the lantern walk", "the flower show",
          "the winter market", "the town meeting", "the midsummer dance"]
QUOTES = [
    "The river is high today", "Have you seen my {obj_bare}", "We will need more {plural} before the fair",
    "The bridge needs mending again", "I think the weather will turn", "Come and have some tea",
    "Nobody in {town} remembers a winter like this", "The ferry is late again", "Mind the geese on the path",
    "Tell {name} that the order is ready", "It is a fine day for the {event_bare}",
    "I left it at {place}", "Where did the time go", "The bees are busy this year",
]
PLURALS = ["apples", "candles", "nails", "lanterns", "chairs", "pears", "boats", "ropes", "letters", "seeds"]
NUMBERS = ["two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "twelve", "twenty"]


def cap(s):
    return s[0].upper() + s[1:]


class Writer:
    def __init__(self, seed):
        self.r = random.Random(seed)
        # Every person has a fixed trade and home, so the text is consistent about who is who.
        trades = TRADES[:]
        self.r.shuffle(trades)
        self.trade = {name: trades[i % len(trades)] for i, (name, _) in enumerate(PEOPLE)}
        self.pron = dict(PEOPLE)
        self.home = {name: self.r.choice(PLACES) for name, _ in PEOPLE}

    def c(self, xs):
        return self.r.choice(xs)

    def person(self):
        return self.c(PEOPLE)[0]

    def who(self, name):
        # Name alone, or name with trade, or trade alone, for variety.
        p = self.r.random()
        if p < 0.55:
            return name
        if p < 0.85:
            return f"{name} the {self.trade[name]}"
        return f"the {self.trade[name]}"

    def quote(self):
        q = self.c(QUOTES)
        return q.format(obj_bare=self.c(OBJECTS).split(" ", 1)[1], plural=self.c(PLURALS), town=TOWN,
                        name=self.person(), event_bare=self.c(EVENTS)[4:], place=self.c(PLACES))

    def sentence(self):
        a, b = self.person(), self.person()
        while b == a:
            b = self.person()
        pa, pb = self.pron[a], self.pron[b]
        k = self.r.randint(0, 17)
        if k == 0:
            verb, prep = self.c(VERBS_PAST)
            return f"{self.c(TIMES)}, {self.who(a)} {verb} {self.c(OBJECTS)} {prep} {self.c(PLACES)}."
        if k == 1:
            return f"{cap(self.c(WEATHER))}, so {self.who(a)} stayed at {self.home[a]} and felt {self.c(FEELINGS)}."
        if k == 2:
            end = "?" if self.r.random() < 0.3 else "."
            return f"\"{self.quote()}{end if end == '?' else ','}\" {self.c(SAY)} {self.who(a)}" + (
                "." if end == "?" else f" to {b}.")
        if k == 3:
            return (f"{cap(self.who(a))} {self.c(WALK)} along the {self.c(ADJ)} road to {self.c(PLACES)}, "
                    f"where {pa} met {b}.")
        if k == 4:
            return f"{cap(self.c(ANIMALS))} waited by {self.c(PLACES)} while {self.who(a)} was away."
        if k == 5:
            return (f"Everyone in {TOWN} knew that {a} kept {self.c(OBJECTS)} at {self.home[a]}, "
                    f"but nobody knew why.")
        if k == 6:
            return (f"When {self.c(WEATHER)}, {self.who(a)} and {self.who(b)} sat together by {RIVER} "
                    f"and talked about {self.c(EVENTS)}.")
        if k == 7:
            return (f"{cap(self.who(a))} counted {self.c(NUMBERS)} {self.c(PLURALS)} and "
                    f"{self.c(NUMBERS)} {self.c(PLURALS)}, then wrote the numbers in a little book.")
        if k == 8:
            return f"{self.c(TIMES)}, {self.c(WEATHER)}, and the {self.c(ADJ)} streets of {TOWN} were empty."
        if k == 9:
            return (f"{cap(self.who(a))} asked {b} to help with {self.c(OBJECTS)}, and {pb} said "
                    f"{pb} would come {self.c(['after lunch', 'tomorrow', 'at once', 'before dark', 'on Monday'])}.")
        if k == 10:
            return (f"The {self.trade[a]} and the {self.trade[b]} had not spoken since {self.c(EVENTS)}, "
                    f"but {self.c(['that day', 'this year', 'at last', 'in the end'])} they shook hands.")
        if k == 11:
            return f"{cap(self.c(PLACES))} was {self.c(ADJ)} and {self.c(ADJ)}, as it always was {self.c(TIMES).lower()}."
        if k == 12:
            return (f"{cap(pa)} had lived in {TOWN} for {self.c(NUMBERS)} years, and "
                    f"{pa} still liked the view from {self.c(PLACES)}.")
        if k == 13:
            return f"Across {RIVER}, {self.c(ANIMALS)} {self.c(['watched', 'followed', 'ignored', 'chased'])} {self.c(ANIMALS)}."
        if k == 14:
            return (f"If {self.c(WEATHER)}, {self.who(a)} would open {self.home[a]} early, "
                    f"and {self.who(b)} would be the first to come in.")
        if k == 15:
            return (f"{cap(self.who(a))} was {self.c(FEELINGS)} because {b} had {self.c(VERBS_PAST)[0]} "
                    f"{self.c(OBJECTS)}.")
        if k == 16:
            return f"The bell of the clock tower rang {self.c(NUMBERS)} times, and {self.who(a)} looked up."
        return (f"{cap(self.who(a))} {self.c(WALK)} home {self.c(['slowly', 'quickly', 'happily', 'in silence'])}, "
                f"thinking about {self.c(OBJECTS)} and {self.c(EVENTS)}.")

    def paragraph(self):
        return " ".join(self.sentence() for _ in range(self.r.randint(3, 7)))

    def text(self, target_bytes):
        parts, size, day = [], 0, 0
        while size < target_bytes:
            if day == 0 or self.r.random() < 0.12:
                day += 1
                heading = f"Day {day} in {TOWN}"
                parts.append(heading)
                size += len(heading) + 2
            p = self.paragraph()
            parts.append(p)
            size += len(p) + 2
        return "\n\n".join(parts) + "\n"


def generate(kib=300, seed=SEED):
    return Writer(seed).text(kib * 1024)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus.txt"))
    ap.add_argument("--kib", type=int, default=300)
    ap.add_argument("--check", action="store_true", help="verify that --out matches the generator")
    args = ap.parse_args(argv)
    text = generate(args.kib)
    if args.check:
        with open(args.out, encoding="utf-8") as f:
            same = f.read() == text
        print(f"{args.out}: {'matches' if same else 'DIFFERS FROM'} the generator")
        return 0 if same else 1
    with open(args.out, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    words = text.split()
    vocab = set(w.strip('.,?!"').lower() for w in words)
    print(f"wrote {args.out}: {len(text):,} characters, {len(words):,} words, "
          f"{len(vocab)} distinct words, {len(set(text))} distinct characters")
    return 0


if __name__ == "__main__":
    sys.exit(main())
